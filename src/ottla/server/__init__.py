"""The node: configuration, the asyncio network layer, bootstrap and shutdown."""
