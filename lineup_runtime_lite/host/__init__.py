"""The Host side the runtime talks to (floor 4): the Host simulator (`simulator`:
`show_surface` intents in, lifecycle events out) and the Surface SDK's client rules for
session-data subscriptions (`surface_client`)."""
