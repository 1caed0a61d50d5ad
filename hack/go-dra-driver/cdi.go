package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// cdiDir holds one CDI spec file per prepared claim: <dir>/<driver>-<claim UID>.json, kind <driver>/gpu,
// one CDI device <claim UID>-<device> per device (unique per claim, so a runtime's cache never gives a
// stale hit).
type cdiDir struct {
	dir    string
	driver string
}

func (c *cdiDir) kind() string { return c.driver + "/gpu" }

func (c *cdiDir) path(uid types.UID) string {
	return filepath.Join(c.dir, fmt.Sprintf("%s-%s.json", c.driver, uid))
}

func (c *cdiDir) deviceID(uid types.UID, device string) string {
	return fmt.Sprintf("%s=%s-%s", c.kind(), uid, device)
}

// write stores the claim's spec atomically (temp file, fsync, rename).
func (c *cdiDir) write(claim *resourceapi.ResourceClaim, devices []string) error {
	spec := cdispec.Spec{Version: "0.6.0", Kind: c.kind()}
	for _, dev := range devices {
		spec.Devices = append(spec.Devices, cdispec.Device{
			Name: fmt.Sprintf("%s-%s", claim.UID, dev),
			ContainerEdits: cdispec.ContainerEdits{Env: []string{
				"GO_DRA_DEVICE=" + dev, "GO_DRA_CLAIM=" + claim.Namespace + "/" + claim.Name,
			}},
		})
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.dir, ".spec-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.path(claim.UID))
}

func (c *cdiDir) remove(uid types.UID) error {
	if err := os.Remove(c.path(uid)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// prepared reads back which devices the existing spec files hold, by claim UID.
func (c *cdiDir) prepared() map[types.UID][]string {
	out := map[types.UID][]string{}
	files, _ := filepath.Glob(filepath.Join(c.dir, c.driver+"-*.json"))
	for _, f := range files {
		uid := types.UID(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), c.driver+"-"), ".json"))
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var spec cdispec.Spec
		if json.Unmarshal(data, &spec) != nil {
			continue
		}
		for _, dev := range spec.Devices {
			out[uid] = append(out[uid], strings.TrimPrefix(dev.Name, string(uid)+"-"))
		}
	}
	return out
}
