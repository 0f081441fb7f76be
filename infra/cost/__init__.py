"""What a stack costs: the cost model, the purchase options compared, their rendering and
`gpuc cost` (the prices it reads are infra/prices/)."""
