#!/bin/sh
# tenants' accounts (run once against slurmdbd); the harness copies this file and ignores it
sacctmgr -i add account research Fairshare=60
sacctmgr -i add account prod Fairshare=40
