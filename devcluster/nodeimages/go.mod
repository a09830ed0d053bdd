module kerf.dev/nodeimages

go 1.22
