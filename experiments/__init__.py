"""Scripts that check the papers' claims in miniature; each writes its section of EXPERIMENTS.md."""
