# From field report 003, python block 4.
# AFTER (lines 423 and 446):
# Track gradient norm history (with bounded size)
if len(self.grad_norm_history) >= self.grad_norm_window:
    self.grad_norm_history.pop(0)  # Remove oldest
self.grad_norm_history.append(float(clipped_norm))  # Convert to Python float
