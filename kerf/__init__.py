"""The `kerf` command: the composition root above the services (`webhook`, `reconciler`,
`recommender`) and the shared library `app`; nothing below imports it."""
