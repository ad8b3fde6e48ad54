module github.com/sagacity-go/sagacity/internal/parallel

go 1.26.0
