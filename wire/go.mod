module github.com/sagacity-go/sagacity/wire

go 1.26.0
