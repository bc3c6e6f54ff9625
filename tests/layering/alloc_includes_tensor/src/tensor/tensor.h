// A fixture of the layering check.
#pragma once
