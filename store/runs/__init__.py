"""Run records: runs, nodes, attempts, calls, events, handoffs, the queue, owners, the
task cache, artifacts, and their SQL."""
