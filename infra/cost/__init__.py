"""What a stack costs: GPU price snapshot, other unit prices, the cost model and its rendering."""
