"""Training stages of the recipe: SFT, domain teachers, MOPD and two rounds of RL, with shared utilities."""
