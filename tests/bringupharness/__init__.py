"""Bare Debian hosts on this machine for the bring-up tests (bundle bringup/): see hosts.py."""
