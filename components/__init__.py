"""ComponentResources that install one GPU allocation owner per node cohort, and the typed stack config."""
