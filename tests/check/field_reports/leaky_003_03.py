# From field report 003, python block 3.
# BEFORE:
self.grad_norm_history = []  # ❌ Grows unbounded
self.grad_norm_window = 100  # Defined but never used to limit size
