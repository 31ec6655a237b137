"""The Anthropic Messages API (`POST /v1/messages`) as a thin adapter: wire models (`wire`),
translation to the pipeline's task (`translate`), the answer and its events in Anthropic's
shape (`render`), and the route."""
