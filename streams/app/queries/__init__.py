"""Reading the history store: named queries, `sql --query` judged on its syntax tree, values as
JSON and CSV carry them, stored summaries and recorded workloads."""
