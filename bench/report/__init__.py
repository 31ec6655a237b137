"""Report: the docs' benchmark pages and the README's headlines, rendered from the committed
results files alone (pages; each benchmark's renderer in page_kinds, page_speed, page_peers)."""
