"""What every benchmark shares: the one writer of results files (results_file), the
markdown tables, the progress bar and the guard that keeps a benchmark's server alone."""
