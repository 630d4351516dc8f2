package provider

import (
	"net/http"
	"testing"
	"time"
)

func TestClassifyFollowsTheContractTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	retryAfter := func(v string) http.Header { return http.Header{"Retry-After": []string{v}} }
	tests := []struct {
		name           string
		status         int
		hasIdempotency bool
		header         http.Header
		wantClass      Class
		wantRetryAfter time.Duration
	}{
		{"200 confirmed effect", 200, false, nil, ClassSucceeded, 0},
		{"201 confirmed effect", 201, true, nil, ClassSucceeded, 0},
		{"202 confirmed effect", 202, false, nil, ClassSucceeded, 0},
		{"204 confirmed effect", 204, false, nil, ClassSucceeded, 0},
		{"400 rejection", 400, false, nil, ClassRejected, 0},
		{"401 rejection", 401, true, nil, ClassRejected, 0},
		{"403 rejection", 403, false, nil, ClassRejected, 0},
		{"404 rejection", 404, false, nil, ClassRejected, 0},
		{"422 rejection", 422, true, nil, ClassRejected, 0},
		{"409 with idempotency: in progress there", 409, true, nil, ClassUnknown, 0},
		{"409 without idempotency: may be an earlier attempt", 409, false, nil, ClassUnknown, 0},
		{"429 without Retry-After", 429, false, nil, ClassNotExecuted, 0},
		{"429 with Retry-After seconds", 429, false, retryAfter("7"), ClassNotExecuted, 7 * time.Second},
		{"429 with garbage Retry-After", 429, false, retryAfter("soon"), ClassNotExecuted, 0},
		{"503 with Retry-After seconds", 503, true, retryAfter("3"), ClassNotExecuted, 3 * time.Second},
		{"503 with Retry-After date", 503, false, retryAfter(now.Add(90 * time.Second).Format(http.TimeFormat)), ClassNotExecuted, 90 * time.Second},
		{"503 with Retry-After 0", 503, false, retryAfter("0"), ClassNotExecuted, 0},
		{"503 without Retry-After", 503, false, nil, ClassUnknown, 0},
		{"503 with garbage Retry-After", 503, false, retryAfter("later"), ClassUnknown, 0},
		{"500 may have executed", 500, true, nil, ClassUnknown, 0},
		{"502 may have executed", 502, false, nil, ClassUnknown, 0},
		{"504 may have executed", 504, false, nil, ClassUnknown, 0},
		{"500 ignores Retry-After", 500, false, retryAfter("5"), ClassUnknown, 0},
		{"301 redirect is not an answer", 301, false, nil, ClassUnknown, 0},
		{"304 is not an answer", 304, false, nil, ClassUnknown, 0},
		{"405 is not in the table", 405, false, nil, ClassUnknown, 0},
		{"408 is not in the table", 408, false, nil, ClassUnknown, 0},
		{"410 is not in the table", 410, false, nil, ClassUnknown, 0},
		{"100 is not an answer", 100, false, nil, ClassUnknown, 0},
		{"599 may have executed", 599, false, nil, ClassUnknown, 0},
		{"nonsense 999", 999, false, nil, ClassUnknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gotClass, gotRetryAfter, reason := Classify(tt.status, tt.hasIdempotency, tt.header, now)
			if gotClass != tt.wantClass {
				t.Errorf("class = %q, want %q", gotClass, tt.wantClass)
			}
			if gotRetryAfter != tt.wantRetryAfter {
				t.Errorf("retryAfter = %v, want %v", gotRetryAfter, tt.wantRetryAfter)
			}
			if gotClass != ClassSucceeded && reason == "" {
				t.Error("no reason given for a non-success class")
			}
		})
	}
}

func TestParseRetryAfterAcceptsSecondsAndHTTPDates(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 5 ", 5 * time.Second, true},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"5s", 0, false},
		{"86401", MaxRetryAfter, true},
		{"99999999999999999999999", MaxRetryAfter, true},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), MaxRetryAfter, true},
		{"Sunday, 01-Jun-25 12:00:30 GMT", 30 * time.Second, true}, // RFC 850, obsolete but valid
		{"Sun Jun  1 12:00:10 2025", 10 * time.Second, true},       // asctime
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
