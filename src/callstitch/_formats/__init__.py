"""Wire formats: one adapter module per provider format, the dispatch that routes events to them."""
