"""The recorder: probes that measure memory at every training-step boundary."""
