"""What the experiment scripts' tests share besides fixtures."""

# The first bytes of every PNG file: a figure was written as an image.
PNG = b"\x89PNG\r\n\x1a\n"
