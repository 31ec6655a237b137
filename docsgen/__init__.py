"""The docs site's generated pages (mkdocs.yml's hook, docsgen/hooks.py): the reference
pages from the code (settings, metrics, problem types) and the benchmark pages from
bench/results/*.json. Pure functions from data to Markdown; tests/docsgen calls them."""
