module eventgw.dev/conformance

go 1.25

require (
	github.com/rudderlabs/analytics-go/v4 v4.2.1
	github.com/segmentio/analytics-go/v3 v3.3.0
)

require (
	github.com/google/uuid v1.3.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	github.com/segmentio/backo-go v1.0.1 // indirect
	github.com/tidwall/gjson v1.14.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
)
