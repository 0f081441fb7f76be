"""`gpuc diff`: two plans compared, with the update impact on running nodes."""
