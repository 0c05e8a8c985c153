"""The group coordinator: classic and consumer groups and their committed offsets."""
