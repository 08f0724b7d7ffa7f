package main

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/procwire/procwire/proc"
)

// lookupRunAs resolves --run-as: a user name or numeric id, with its
// primary group and supplementary groups.
func lookupRunAs(name string) (*proc.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		var idErr error
		if u, idErr = user.LookupId(name); idErr != nil {
			return nil, fmt.Errorf("--run-as %q: %w", name, err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--run-as %q: gid %q: %w", name, u.Gid, err)
	}
	r := &proc.User{UID: uint32(uid), GID: uint32(gid)}
	ids, _ := u.GroupIds() // none known: no supplementary group
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil && uint32(g) != r.GID {
			r.Groups = append(r.Groups, uint32(g))
		}
	}
	return r, nil
}
