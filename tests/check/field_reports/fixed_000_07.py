# From field report 000, python block 7.
# 🔧 修復記憶體洩漏：清理輸出並強制垃圾回收
self.validation_step_outputs.clear()
del all_preds, all_targets, preds_np, targets_np
gc.collect()
torch.cuda.empty_cache()
