# From field report 002, python block 8.
with torch.no_grad():  # CCSR 處理時暫時不需要梯度
    # 處理邏輯
    ...
    del ccsr_results, lr_images  # 釋放中間結果
    del ccsr_combined  # 釋放

# 重新啟用梯度
ccsr_output.requires_grad_(True)
