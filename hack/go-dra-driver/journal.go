package main

import (
	"encoding/json"
	"os"
	"sync"
)

// entry is one JSON line of the journal.
type entry struct {
	Op         string        `json:"op"`
	Method     string        `json:"method,omitempty"` // the gRPC method that asked (v1 or v1beta1)
	Namespace  string        `json:"namespace,omitempty"`
	Name       string        `json:"name,omitempty"`
	UID        string        `json:"uid,omitempty"`
	Devices    []entryDevice `json:"devices,omitempty"`
	Registered bool          `json:"registered,omitempty"`
	Error      string        `json:"error,omitempty"`
}

type entryDevice struct {
	Request string   `json:"request"`
	Pool    string   `json:"pool"`
	Device  string   `json:"device"`
	CDIIDs  []string `json:"cdiIDs"`
}

// journal appends entries to a file, one JSON object a line; a nil journal writes nothing.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(path string) (*journal, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f}, nil
}

func (j *journal) write(e entry) {
	if j == nil {
		return
	}
	data, _ := json.Marshal(e)
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(data, '\n'))
}

func (j *journal) close() {
	if j != nil {
		_ = j.f.Close()
	}
}
