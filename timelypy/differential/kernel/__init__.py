"""The differential layer's kernel modules: its hot loops, pure Python, one contract each."""
