# From /work/shared/seeds/003_8e27486a8d0fd3e1.txt, python block 3.
# BEFORE:
self.grad_norm_history = []  # ❌ Grows unbounded
self.grad_norm_window = 100  # Defined but never used to limit size
