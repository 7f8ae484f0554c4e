"""Wire framing: telling the framing from the first bytes, NDJSON, a JSON array, the AWS event stream."""
