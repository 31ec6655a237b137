"""OpenAI Chat Completions (`POST /v1/chat/completions`) as a thin adapter: wire models
(`wire`), translation to the pipeline's task (`translate`), the answer and its events as
completions and chunks (`render`), and the route."""
