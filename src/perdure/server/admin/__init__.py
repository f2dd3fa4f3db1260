"""The admin surface: the admin API (:mod:`.routes`) and its OpenAPI document
(:mod:`.openapi`), ``/metrics`` (:mod:`.metrics`) and the inspector UI (:mod:`.ui`)."""
