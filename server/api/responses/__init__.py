"""The OpenAI Responses API (`POST /v1/responses`), stateless, as a thin adapter: wire models
(`request`, `output`), translation to the pipeline's task (`translate`), the answer and its
events in the Responses shape (`output`, `events`), and the route."""
