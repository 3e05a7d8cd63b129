"""Note search and recall: the search policy, the stemmer, the per-bank term index and
its snapshots, semantic vectors, recall reads, and their SQL."""
