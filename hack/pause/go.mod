module local.draflow/pause

go 1.26
