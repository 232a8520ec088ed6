"""The loops that send requests, and the bodies they build ahead of their sends."""
