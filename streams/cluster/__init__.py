"""The cluster model every detector and planner reads: the view of nodes, tasks, queues and
the capacity index (``view``), the queue and quota ledgers (``queues``), and the book of open
signals (``book``). No detector lives here, and nothing here imports one."""
