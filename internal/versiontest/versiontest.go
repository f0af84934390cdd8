// Package versiontest holds types for the root package's tests of
// versions: the JSON shapes of types the tests declare, under other Go
// names and in another package, as a team that moves its types out of
// package main has them.
package versiontest

// Order has the JSON shape of the tests' order type.
type Order struct {
	ID    string `json:"id"`
	Lines []Line `json:"lines"`
	Note  string `json:"note,omitempty"`
}

// Line is a line of an Order.
type Line struct {
	SKU      string  `json:"sku"`
	Quantity int     `json:"qty"`
	Price    float64 `json:"price"`
}

// Receipt has the JSON shape of the tests' receipt type.
type Receipt struct {
	Order string `json:"order"`
	Total float64
}
