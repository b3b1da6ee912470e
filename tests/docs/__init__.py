"""The documentation as executable text: README and docs code blocks, examples, packaging."""
