"""Kafka edges: topic administration and the producer that publishes events onto the bus."""
