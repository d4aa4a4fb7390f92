"""The elicitation primitive: model, lifecycle rules, schema checks, broker and event bus."""
