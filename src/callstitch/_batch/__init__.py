"""Batch reprocessing: sources and containers, cutting files into responses, workers, records."""
