"""The group coordinator: classic, consumer and share groups, and committed offsets."""
