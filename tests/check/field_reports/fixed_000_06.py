# From field report 000, python block 6.
def on_validation_epoch_end(self):
    # 🔧 優化：只收集數據，不畫圖
    self.latest_validation_data = {
        "predictions": all_preds.clone(),
        "targets": all_targets.clone(),
        "epoch": current_epoch
    }
    print(f"📊 Validation epoch {current_epoch}: 收集了 {len(all_preds)} 個樣本的預測數據")
    print(f"   將在訓練結束後生成scatter plots")

def generate_final_validation_plots(self, output_dir: str = None):
    # 🔧 只在訓練結束後生成一次最終圖表
    # 基於最後一個epoch的驗證數據
