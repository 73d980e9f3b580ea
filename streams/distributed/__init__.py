"""The distributed runner: the core operators on faust-streaming agents over Apache Kafka."""
