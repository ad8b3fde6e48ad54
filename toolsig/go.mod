module github.com/sagacity-go/sagacity/toolsig

go 1.26.0
