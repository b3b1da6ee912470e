"""Driver sessions: updates, bulk loads, waits that tell the truth, the progress display."""
